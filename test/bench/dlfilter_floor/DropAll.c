// The floor scripts/bench-dlfilter.sh measures the magic-trace dlfilter
// against: a perf dlfilter that drops every sample at once, so that perf
// decodes the trace and synthesizes its samples but formats and prints
// none. (perf 6.1's interface: <perf/perf_dlfilter.h>.)
#include <perf/perf_dlfilter.h>

struct perf_dlfilter_fns perf_dlfilter_fns;

int filter_event(void *data, const struct perf_dlfilter_sample *sample,
                 void *ctx) {
  (void)data;
  (void)sample;
  (void)ctx;
  return 1;
}
