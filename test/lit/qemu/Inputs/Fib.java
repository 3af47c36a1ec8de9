// The JVM test's program (test/lit/qemu/jvm.test): a recursive method
// called often enough that the JIT compiles it (C1, then C2), so most of
// its calls run compiled code from the code cache, which only the JVM's
// perf map names.
public class Fib {
  static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

  public static void main(String[] args) {
    int total = 0;
    for (int i = 0; i < 200; ++i)
      total += fib(18);
    System.out.println(total);
  }
}
