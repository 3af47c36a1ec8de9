// A C++ program whose exceptions go through Debian's libstdc++ and
// libgcc_s, for the corpus (test/corpus/run.py, test/lit/corpus/): thrown
// by libstdc++ (vector::at, stoi), thrown by our code from a streambuf that
// libstdc++'s istream calls, caught and rethrown there (__cxa_rethrow), and
// caught back in our frames. Built with clang++-22 -O2 -g, dynamically
// linked (test/inputs/CMakeLists.txt: corpus_throw). `work` is where the
// corpus starts tracing.
#include <cstdio>
#include <istream>
#include <stdexcept>
#include <streambuf>
#include <string>
#include <vector>

namespace {

/// A stream buffer that fails on its second refill: istream::operator>>
/// (in libstdc++.so) is between the throw and the catch.
class FailingBuf : public std::streambuf {
public:
  explicit FailingBuf(int round) : round(round) {}

protected:
  int_type underflow() override {
    if (calls++ > 0)
      throw std::runtime_error("refill " + std::to_string(round));
    setg(digits, digits, digits + 3);
    return traits_type::to_int_type(digits[0]);
  }

private:
  char digits[3] = {'4', '2', '7'};
  int round;
  int calls = 0;
};

__attribute__((noinline)) int outOfRange(const std::vector<int> &values,
                                         int depth) {
  if (depth > 0)
    return outOfRange(values, depth - 1) + 1;
  return values.at(values.size() + 1);
}

__attribute__((noinline)) int badNumber(const std::string &text, int depth) {
  if (depth > 0)
    return badNumber(text, depth - 1) + 1;
  return std::stoi(text);
}

__attribute__((noinline)) int failingStream(int round) {
  FailingBuf buffer(round);
  std::istream in(&buffer);
  in.exceptions(std::ios::badbit);
  int value = 0;
  in >> value;
  return value;
}

} // namespace

/// One round of the work: three throws, each caught here. extern "C": the
/// corpus starts tracing at --start=work.
extern "C" __attribute__((noinline)) int work(int round) {
  std::vector<int> values(16, round);
  int caught = 0;
  try {
    outOfRange(values, round % 5);
  } catch (const std::out_of_range &) {
    ++caught;
  }
  try {
    badNumber("x" + std::to_string(round), round % 3);
  } catch (const std::invalid_argument &) {
    ++caught;
  }
  try {
    failingStream(round);
  } catch (const std::runtime_error &) {
    ++caught;
  }
  return caught;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? std::stoi(argv[1]) : 100;
  int caught = 0;
  for (int round = 0; round < rounds; ++round)
    caught += work(round);
  std::printf("%d exceptions caught\n", caught);
  return caught == 3 * rounds ? 0 : 1;
}
