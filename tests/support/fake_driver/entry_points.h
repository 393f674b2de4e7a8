// The driver API entry points the fake implements, declared for the
// cuGetProcAddress_v2 table in driver.cc; each file here defines its group.
#ifndef VYRE_TESTS_SUPPORT_FAKE_DRIVER_ENTRY_POINTS_H_
#define VYRE_TESTS_SUPPORT_FAKE_DRIVER_ENTRY_POINTS_H_

#include <cuda.h>

#include <cstddef>

namespace fake_driver {

// --- init_device.cc ----------------------------------------------------------

CUresult FakeInit(unsigned int flags);
CUresult fake_cuDriverGetVersion(int* version);
CUresult fake_cuGetErrorName(CUresult error, const char** out);
CUresult fake_cuGetErrorString(CUresult error, const char** out);
CUresult fake_cuDeviceGetCount(int* count);
CUresult fake_cuDeviceGet(CUdevice* device, int ordinal);
CUresult fake_cuDeviceGetName(char* name, int len, CUdevice dev);
CUresult fake_cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice dev);
CUresult fake_cuDeviceTotalMem(size_t* bytes, CUdevice dev);
CUresult fake_cuDeviceCanAccessPeer(int* can_access, CUdevice dev, CUdevice peer);
CUresult fake_cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags);

// --- context.cc --------------------------------------------------------------

CUresult fake_cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice dev);
CUresult fake_cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult fake_cuDevicePrimaryCtxReset(CUdevice dev);
CUresult fake_cuCtxGetCurrent(CUcontext* context);
CUresult fake_cuCtxSetCurrent(CUcontext context);
CUresult fake_cuCtxSynchronize();

// --- memory.cc ---------------------------------------------------------------

CUresult fake_cuMemGetInfo(size_t* free_bytes, size_t* total_bytes);
CUresult fake_cuMemAlloc(CUdeviceptr* ptr, size_t bytes);
CUresult fake_cuMemFree(CUdeviceptr ptr);
CUresult fake_cuMemHostAlloc(void** ptr, size_t bytes, unsigned int flags);
CUresult fake_cuMemFreeHost(void* ptr);
CUresult fake_cuMemHostRegister(void* ptr, size_t bytes, unsigned int flags);
CUresult fake_cuMemHostUnregister(void* ptr);
CUresult fake_cuPointerGetAttributes(unsigned int count, CUpointer_attribute* attributes,
                                     void** data, CUdeviceptr ptr);

// --- ipc.cc ------------------------------------------------------------------

CUresult fake_cuDeviceGetUuid(CUuuid* uuid, CUdevice dev);
CUresult fake_cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr ptr);
CUresult fake_cuIpcOpenMemHandle(CUdeviceptr* ptr, CUipcMemHandle handle, unsigned int flags);
CUresult fake_cuIpcCloseMemHandle(CUdeviceptr ptr);

// --- transfers.cc ------------------------------------------------------------

CUresult fake_cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream);
CUresult fake_cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t bytes, CUstream stream);
CUresult fake_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
CUresult fake_cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_context, CUdeviceptr src,
                                CUcontext src_context, size_t bytes, CUstream stream);
CUresult fake_cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t bytes, CUstream stream);
CUresult fake_cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t count,
                               CUstream stream);

// --- modules.cc --------------------------------------------------------------

CUresult fake_cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int count,
                                 CUjit_option* options, void** values);
CUresult fake_cuModuleUnload(CUmodule module);
CUresult fake_cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name);
CUresult fake_cuFuncGetAttribute(int* value, CUfunction_attribute attribute, CUfunction function);
CUresult fake_cuFuncSetAttribute(CUfunction function, CUfunction_attribute attribute, int value);
CUresult fake_cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, CUfunction function,
                                                          int block_size, size_t shared_bytes);

// --- launch.cc ---------------------------------------------------------------

CUresult fake_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shared, CUstream stream,
                             void** params, void** extra);
CUresult fake_cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                        unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                        CUstream stream, void** params);

// --- streams_events.cc -------------------------------------------------------

CUresult fake_cuStreamCreate(CUstream* stream, unsigned int flags);
CUresult fake_cuStreamDestroy(CUstream stream);
CUresult fake_cuStreamSynchronize(CUstream stream);
CUresult fake_cuStreamQuery(CUstream stream);
CUresult fake_cuEventCreate(CUevent* event, unsigned int flags);
CUresult fake_cuEventDestroy(CUevent event);
CUresult fake_cuEventRecord(CUevent event, CUstream stream);
CUresult fake_cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags);
CUresult fake_cuEventSynchronize(CUevent event);
CUresult fake_cuEventQuery(CUevent event);
CUresult fake_cuEventElapsedTime(float* ms, CUevent start, CUevent end);

// --- capture.cc --------------------------------------------------------------

CUresult fake_cuStreamBeginCapture(CUstream stream, CUstreamCaptureMode mode);
CUresult fake_cuStreamEndCapture(CUstream stream, CUgraph* graph);
CUresult fake_cuGraphDestroy(CUgraph graph);
// graph_build.cc
CUresult fake_cuGraphCreate(CUgraph* graph, unsigned int flags);
CUresult fake_cuGraphAddMemsetNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                                   size_t count, const CUDA_MEMSET_NODE_PARAMS* params,
                                   CUcontext context);
CUresult fake_cuGraphAddKernelNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                                   size_t count, const CUDA_KERNEL_NODE_PARAMS* params);
CUresult fake_cuGraphAddChildGraphNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                                       size_t count, CUgraph child);
CUresult fake_cuGraphConditionalHandleCreate(CUgraphConditionalHandle* out, CUgraph graph,
                                             CUcontext context, unsigned int default_value,
                                             unsigned int flags);
CUresult fake_cuGraphAddNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps,
                             const CUgraphEdgeData* edges, size_t count,
                             CUgraphNodeParams* params);
CUresult fake_cuGraphKernelNodeSetParams(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS* params);
CUresult fake_cuGraphMemsetNodeSetParams(CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS* params);
CUresult fake_cuGraphGetNodes(CUgraph graph, CUgraphNode* nodes, size_t* count);
CUresult fake_cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType* type);
CUresult fake_cuGraphMemsetNodeGetParams(CUgraphNode node, CUDA_MEMSET_NODE_PARAMS* params);
CUresult fake_cuGraphKernelNodeGetParams(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS* params);

// --- graph_exec.cc -----------------------------------------------------------

CUresult fake_cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                          unsigned long long flags);
CUresult fake_cuGraphExecDestroy(CUgraphExec exec);
CUresult fake_cuGraphUpload(CUgraphExec exec, CUstream stream);
CUresult fake_cuGraphLaunch(CUgraphExec exec, CUstream stream);
CUresult fake_cuGraphExecKernelNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                             const CUDA_KERNEL_NODE_PARAMS* params);
CUresult fake_cuGraphExecMemsetNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                             const CUDA_MEMSET_NODE_PARAMS* params,
                                             CUcontext context);

}  // namespace fake_driver

#endif  // VYRE_TESTS_SUPPORT_FAKE_DRIVER_ENTRY_POINTS_H_
