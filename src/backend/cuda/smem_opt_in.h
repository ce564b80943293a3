// A kernel's opt-in to more than 48 KB of dynamic shared memory, per device.
// cudaFuncSetAttribute(MaxDynamicSharedMemorySize) acts on the kernel in the current device's context,
// so a flag set once per process would leave a second GPU's launches of the same kernel without it
// (they fail with "invalid argument"). opt_in_smem keeps a record of (device, kernel, bytes) and sets the
// attribute the first time a device launches a kernel with that size.
#pragma once

namespace mere::cuda {

// Raises `fn`'s dynamic shared-memory limit to `bytes` on the current device, once per (device, fn,
// bytes). Thread-safe; costs a lock and a lookup after the first call.
void opt_in_smem(const void* fn, int bytes);

template <class Fn>
void opt_in_smem(Fn* fn, int bytes) {
  opt_in_smem(reinterpret_cast<const void*>(fn), bytes);
}

}  // namespace mere::cuda
