// A freestanding program for another architecture (errors.test).
void _start(void) {
  for (;;)
    ;
}
