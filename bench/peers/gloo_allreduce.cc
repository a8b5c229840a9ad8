// The Gloo peer: gloo::allreduce (fp32 sum, Gloo's default ring algorithm) over Gloo's TCP
// transport on the loopback interface (Debian's libgloo has no shared-memory transport), or on the
// address --addr names (the multi-host section: each rank its host's address), timed as the perf
// tools time (warm-up, gloo::barrier, iterations back to back, the slowest rank's average).
//
//   RANK=r WORLD_SIZE=n gloo_allreduce --store DIR --plan SIZE:ITERS:WARMUP[,...] [--json FILE]
//                                      [--addr ADDRESS]
//
// The bench driver starts the n processes itself; they meet through a gloo FileStore in DIR.
#include "bench_common.h"

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace {

struct Options {
  int rank = -1;
  int size = 0;
  std::string store;
  std::string plan;
  std::string json;
  std::string addr = "127.0.0.1";
};

bool parseOptions(int argc, char** argv, Options* opts) {
  const char* rank = std::getenv("RANK");
  const char* size = std::getenv("WORLD_SIZE");
  if (rank == nullptr || size == nullptr) {
    return false;
  }
  opts->rank = std::atoi(rank);
  opts->size = std::atoi(size);
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--store") == 0) {
      opts->store = argv[i + 1];
    } else if (std::strcmp(argv[i], "--plan") == 0) {
      opts->plan = argv[i + 1];
    } else if (std::strcmp(argv[i], "--json") == 0) {
      opts->json = argv[i + 1];
    } else if (std::strcmp(argv[i], "--addr") == 0) {
      opts->addr = argv[i + 1];
    } else {
      return false;
    }
  }
  return argc % 2 == 1 && opts->size > 0 && opts->rank >= 0 && opts->rank < opts->size &&
         !opts->store.empty() && !opts->plan.empty();
}

void allreduce(const std::shared_ptr<gloo::Context>& context, float* in, float* out, size_t count) {
  gloo::AllreduceOptions opts(context);
  opts.setInput(in, count);
  opts.setOutput(out, count);
  opts.setReduceFunction(
      static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
  gloo::allreduce(opts);
}

double slowest(const std::shared_ptr<gloo::Context>& context, double value) {
  gloo::AllreduceOptions opts(context);
  opts.setOutput(&value, 1);
  opts.setReduceFunction(
      static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<double>));
  gloo::allreduce(opts);
  return value;
}

int run(const Options& opts) {
  bench_plan_t plan = {};
  if (bench_plan_parse(opts.plan.c_str(), &plan) != 0) {
    return 2;
  }
  gloo::transport::tcp::attr attr(opts.addr.c_str());
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<gloo::rendezvous::Context>(opts.rank, opts.size);
  gloo::rendezvous::FileStore store(opts.store);
  context->connectFullMesh(store, device);

  uint64_t maxElems = 1;
  for (size_t i = 0; i < plan.nsteps; i++) {
    bench_layout_t layout;
    bench_layout(BENCH_ALL_REDUCE, plan.steps[i].bytes, sizeof(float), opts.size, &layout);
    maxElems = std::max<uint64_t>(maxElems, layout.count);
  }
  // Value-initialised, so every page is touched before the first timed call.
  std::vector<float> in(maxElems, 1.0f), out(maxElems, 0.0f);
  std::vector<bench_row_t> rows(plan.nsteps);
  if (opts.rank == 0) {
    bench_print_header("gloo_allreduce", "all_reduce", opts.size, opts.addr == "127.0.0.1" ? "gloo (tcp loopback, ring)" : "gloo (tcp, ring)");
  }
  for (size_t i = 0; i < plan.nsteps; i++) {
    const bench_step_t& step = plan.steps[i];
    bench_layout_t layout;
    bench_layout(BENCH_ALL_REDUCE, step.bytes, sizeof(float), opts.size, &layout);
    for (uint32_t it = 0; it < step.warmup; it++) {
      allreduce(context, in.data(), out.data(), layout.count);
    }
    gloo::BarrierOptions barrier(context);
    gloo::barrier(barrier);
    double start = bench_now_us();
    for (uint32_t it = 0; it < step.iters; it++) {
      allreduce(context, in.data(), out.data(), layout.count);
    }
    double avg = (bench_now_us() - start) / step.iters;
    rows[i] = bench_row_t{layout.data_elems * sizeof(float), slowest(context, avg)};
    if (opts.rank == 0) {
      bench_print_row(&rows[i]);
    }
  }
  int status = 0;
  if (opts.rank == 0 && !opts.json.empty()) {
    status = bench_json_write(opts.json.c_str(), "gloo_allreduce", "all_reduce", opts.size,
                              "gloo", rows.data(), rows.size()) != 0;
  }
  bench_plan_free(&plan);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  Options opts;
  if (!parseOptions(argc, argv, &opts)) {
    std::fprintf(stderr,
                 "usage: RANK=r WORLD_SIZE=n gloo_allreduce --store DIR "
                 "--plan SIZE:ITERS:WARMUP[,...] [--json FILE] [--addr ADDRESS]\n");
    return 2;
  }
  try {
    return run(opts);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_allreduce: rank %d: %s\n", opts.rank, e.what());
    return 1;
  }
}
