// `vyre-cuda egraph` and `vyre-cuda egraph-bench`: e-graph congruence
// (rebuild) through the public C API, on the GPU or the library's CPU
// reference. Registered in vyre_cuda_cli.cc's main() like `info`.
//
//   vyre-cuda egraph FILE.json [--device gpu|cpu] [--unions-file U]
//                    [--step DELTA.json[,UNIONS.txt]]...
//                    [--partition-out P] [--json] [--cpu-threads N]
//   vyre-cuda egraph-bench --rows N --arity A --seed S [--json] [--repeat R]
//                    [--cpu-threads N]
//
// Exit codes as the rest of the tool: 0 ok, 1 error, 2 no usable GPU (the Fix
// suggests --device cpu).
#ifndef VYRE_TOOLS_EGRAPH_COMMAND_H_
#define VYRE_TOOLS_EGRAPH_COMMAND_H_

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace vyre::cli {

struct EgraphOptions {
  std::string file;
  std::string device = "gpu";
  std::string unions_file;
  std::string partition_out;
  // "DELTA.json" or "DELTA.json,UNIONS.txt" (split at the first comma), in
  // order: e-nodes appended to the image, then unions, then a rebuild.
  std::vector<std::string> steps;
  bool json = false;
  uint32_t cpu_threads = 0;
};

void AddEgraphCommand(CLI::App& app, EgraphOptions& options);
int RunEgraph(const EgraphOptions& options);

struct EgraphBenchOptions {
  uint64_t rows = 1u << 20;
  uint32_t arity = 2;
  uint64_t seed = 1;
  bool json = false;
  uint32_t repeat = 1;
  uint32_t cpu_threads = 0;
  bool skip_single_thread = false;
};

void AddEgraphBenchCommand(CLI::App& app, EgraphBenchOptions& options);
int RunEgraphBench(const EgraphBenchOptions& options);

}  // namespace vyre::cli

#endif  // VYRE_TOOLS_EGRAPH_COMMAND_H_
