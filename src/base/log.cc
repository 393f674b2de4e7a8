#include "base/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include <mutex>

namespace vyre {
namespace {

struct LogSink {
  std::mutex mu;
  vyre_log_callback callback = nullptr;
  void* user_data = nullptr;
};

LogSink& Sink() {
  static LogSink* sink = new LogSink;  // never destroyed: logging may run at exit
  return *sink;
}

std::atomic<int> g_max_level{-1};  // -1: no callback installed

bool ReadTraceEnv() {
  const char* value = std::getenv("VYRE_CUDA_TRACE");
  return value != nullptr && value[0] != '\0' && value[0] != '0';
}

}  // namespace

bool TraceEnabled() {
  static const bool enabled = ReadTraceEnv();
  return enabled;
}

void SetLogCallback(vyre_log_callback callback, void* user_data, vyre_log_level max_level) {
  LogSink& sink = Sink();
  std::lock_guard lock(sink.mu);
  sink.callback = callback;
  sink.user_data = user_data;
  g_max_level.store(callback ? static_cast<int>(max_level) : -1, std::memory_order_release);
}

bool LogEnabled(vyre_log_level level) {
  int max = g_max_level.load(std::memory_order_acquire);
  if (max >= 0) return static_cast<int>(level) <= max || (level == VYRE_LOG_TRACE && TraceEnabled());
  return level == VYRE_LOG_TRACE && TraceEnabled();
}

void LogMessage(vyre_log_level level, const std::string& message) {
  LogSink& sink = Sink();
  std::lock_guard lock(sink.mu);
  if (sink.callback != nullptr) {
    sink.callback(sink.user_data, level, message.c_str());
  } else {
    std::fprintf(stderr, "[vyre-cuda] %s\n", message.c_str());
  }
}

}  // namespace vyre
