// Graph capture (wick::Graph): the work a body queues on the device's one stream is recorded into
// a CUDA/HIP graph, instantiated once and replayed with one launch. The blocks the body allocates
// come from a pool private to the graph (allocator.hpp), since every replay writes them again.
#include <string>

#include "backend/gpu/allocator.hpp"
#include "backend/gpu/gpu_storage.hpp"

namespace wick::gpu {

namespace {

class GpuRecording final : public Backend::Recording {
 public:
  GpuRecording(int ordinal, gpuGraphExec_t exec, int pool) : ordinal_(ordinal), exec_(exec), pool_(pool) {}
  ~GpuRecording() override {
    DeviceGuard g(ordinal_);
    // The last replay may still run: its blocks go back to the cache only after it.
    (void)gpuStreamSynchronize(context(ordinal_).stream);
    (void)gpuGraphExecDestroy(exec_);
    (void)gpuGetLastError();
    free_pool(ordinal_, pool_);
  }
  GpuRecording(const GpuRecording&) = delete;
  GpuRecording& operator=(const GpuRecording&) = delete;

  void replay() override {
    DeviceGuard g(ordinal_);
    check(gpuGraphLaunch(exec_, context(ordinal_).stream), "GraphLaunch");
  }

 private:
  int ordinal_;
  gpuGraphExec_t exec_;
  int pool_;
};

}  // namespace

std::unique_ptr<Backend::Recording> GpuBackend::capture(const std::function<void()>& body) {
  DeviceGuard g(ordinal_);
  DeviceContext& c = context(ordinal_);
  const int pool = open_pool(ordinal_);
  const std::string where = std::string("Graph::capture on ") + WICK_GPU_VENDOR + ":" + std::to_string(ordinal_);
  // Relaxed: a block the cache lacks may still be allocated while recording.
  gpuError_t e = gpuStreamBeginCapture(c.stream, gpuStreamCaptureModeRelaxed);
  if (e != gpuSuccess) {
    (void)gpuGetLastError();
    close_pool(ordinal_);
    free_pool(ordinal_, pool);
    throw Error(ErrorKind::Device, where + ": cannot start recording: " + gpuGetErrorString(e));
  }
  auto abandon = [&] {
    gpuGraph_t graph = nullptr;
    (void)gpuStreamEndCapture(c.stream, &graph);
    if (graph) (void)gpuGraphDestroy(graph);
    (void)gpuGetLastError();
    close_pool(ordinal_);
    free_pool(ordinal_, pool);
  };
  try {
    body();
  } catch (const Error& err) {
    abandon();
    throw Error(err.kind(), where + ": the body failed while recording: " + err.what() +
                                " (a recorded body may only queue device work: nothing that waits for the "
                                "device or copies to or from the host, e.g. to_vector, from_vector, index ops "
                                "that check their ids)");
  } catch (...) {
    abandon();
    throw;
  }
  gpuGraph_t graph = nullptr;
  e = gpuStreamEndCapture(c.stream, &graph);
  close_pool(ordinal_);
  if (e != gpuSuccess || graph == nullptr) {
    (void)gpuGetLastError();
    free_pool(ordinal_, pool);
    throw Error(ErrorKind::Device, where + ": recording failed: " + gpuGetErrorString(e) +
                                       " (something in the body waited for the device or used another stream)");
  }
  gpuGraphExec_t exec = nullptr;
  e = gpuGraphInstantiateWithFlags(&exec, graph, 0);
  (void)gpuGraphDestroy(graph);
  if (e != gpuSuccess) {
    (void)gpuGetLastError();
    free_pool(ordinal_, pool);
    throw Error(ErrorKind::Device, where + ": cannot instantiate the graph: " + gpuGetErrorString(e));
  }
  return std::make_unique<GpuRecording>(ordinal_, exec, pool);
}

}  // namespace wick::gpu
