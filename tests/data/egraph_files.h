// The e-graph files the tests run on (tests/data/egraphs/README.md): the
// repository's set, tests/data/egraphs, always; widened, where it is
// present, by a fuller folder: VYRE_EGRAPHS_DIR from the environment, else
// the build's default (../shared/egraphs beside the repository). One file
// per path relative to its folder (the repository's copy first), every
// *.json below either folder, sorted by that relative path.
//
// Header-only (C++17, std::filesystem); the tests that use it define
// VYRE_EGRAPHS_BUILTIN_DIR, VYRE_EGRAPHS_DEFAULT_DIR and VYRE_SOURCE_DIR.
#ifndef VYRE_TESTS_DATA_EGRAPH_FILES_H_
#define VYRE_TESTS_DATA_EGRAPH_FILES_H_

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <system_error>
#include <vector>

#ifndef VYRE_EGRAPHS_BUILTIN_DIR
#define VYRE_EGRAPHS_BUILTIN_DIR ""
#endif
#ifndef VYRE_EGRAPHS_DEFAULT_DIR
#define VYRE_EGRAPHS_DEFAULT_DIR ""
#endif
#ifndef VYRE_SOURCE_DIR
#define VYRE_SOURCE_DIR ""
#endif

namespace vyre_test {

struct EgraphFileSet {
  std::string builtin_dir;  // tests/data/egraphs
  std::string extra_dir;    // the resolved VYRE_EGRAPHS_DIR ("" when none is set)
  bool extra_from_env = false;    // VYRE_EGRAPHS_DIR came from the environment
  size_t builtin_files = 0;       // *.json under builtin_dir
  size_t extra_files = 0;         // *.json under extra_dir (before de-duplication)
  std::vector<std::string> paths;  // the union, sorted by relative path
};

// A relative path is tried from the working directory, then from the source tree.
inline std::string ResolveEgraphsDir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!dir.empty() && fs::path(dir).is_relative() && !fs::is_directory(dir, error) &&
      std::string(VYRE_SOURCE_DIR).size() > 0) {
    const fs::path from_source = fs::path(VYRE_SOURCE_DIR) / dir;
    if (fs::is_directory(from_source, error)) return from_source.string();
  }
  return dir;
}

// Adds every *.json below `dir` to `by_relative` (keeping entries already
// there); returns how many it found.
inline size_t AddEgraphJsonFiles(const std::string& dir,
                                 std::map<std::string, std::string>* by_relative) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (dir.empty() || !fs::is_directory(dir, error)) return 0;
  size_t found = 0;
  for (fs::recursive_directory_iterator it(dir, error), end; !error && it != end;
       it.increment(error)) {
    if (it->is_regular_file(error) && it->path().extension() == ".json") {
      ++found;
      const std::string relative = it->path().lexically_relative(dir).generic_string();
      by_relative->emplace(relative, it->path().string());
    }
  }
  return found;
}

inline EgraphFileSet FindEgraphFiles() {
  EgraphFileSet set;
  const char* env = std::getenv("VYRE_EGRAPHS_DIR");
  set.extra_from_env = env != nullptr && env[0] != '\0';
  set.builtin_dir = ResolveEgraphsDir(VYRE_EGRAPHS_BUILTIN_DIR);
  set.extra_dir = ResolveEgraphsDir(set.extra_from_env ? env : VYRE_EGRAPHS_DEFAULT_DIR);
  std::map<std::string, std::string> by_relative;
  set.builtin_files = AddEgraphJsonFiles(set.builtin_dir, &by_relative);
  set.extra_files = AddEgraphJsonFiles(set.extra_dir, &by_relative);
  for (const auto& [relative, path] : by_relative) set.paths.push_back(path);
  return set;
}

}  // namespace vyre_test

#endif  // VYRE_TESTS_DATA_EGRAPH_FILES_H_
