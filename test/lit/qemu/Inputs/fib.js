// A fib loop for node: warmed up until V8 optimizes fib, then
// process.cpuUsage() (uv_getrusage, the recording's --start), then more.
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
let s = 0;
for (let i = 0; i < 40; i++) s += fib(22);
process.cpuUsage();
for (let i = 0; i < 40; i++) s += fib(22);
console.log(s);
