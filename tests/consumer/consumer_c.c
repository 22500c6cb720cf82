/* An installed cake's C ABI: create a runtime, print the plans of a shapes document and the
 * compile worker the library found.   consumer_c SHAPES_JSON
 * Exit 0: every problem has a route; 1: otherwise (the message says why). */
#include <stdio.h>

#include "cake_c.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: consumer_c SHAPES_JSON\n");
    return 2;
  }
  cake_runtime* rt = NULL;
  if (cake_runtime_create(NULL, &rt) != CAKE_OK) {
    fprintf(stderr, "consumer_c: %s\n", cake_last_error());
    return 1;
  }
  const char* plans = NULL;
  cake_status st = cake_plan(rt, argv[1], &plans);
  printf("%s\nworker: %s\n", plans, cake_compile_worker_path());
  if (st != CAKE_OK) fprintf(stderr, "consumer_c: %s\n", cake_last_error());
  cake_runtime_destroy(rt);
  return st == CAKE_OK ? 0 : 1;
}
