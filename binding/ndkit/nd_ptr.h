// Owning pointer to an ND v2 interface (ComPtr-like): one reference, released on reset or destruction.
#ifndef NETDIRECT_ND_PTR_H_
#define NETDIRECT_ND_PTR_H_

#include <utility>

#include "nd/nd2.h"

namespace netdirect {

template <typename T>
class NdPtr {
 public:
  NdPtr() = default;
  NdPtr(const NdPtr&) = delete;
  NdPtr& operator=(const NdPtr&) = delete;
  NdPtr(NdPtr&& other) noexcept : p_(other.p_) { other.p_ = nullptr; }
  NdPtr& operator=(NdPtr&& other) noexcept {
    if (this != &other) {
      reset();
      p_ = other.p_;
      other.p_ = nullptr;
    }
    return *this;
  }
  ~NdPtr() { reset(); }

  // Adopts a pointer that already carries the reference this NdPtr will own.
  static NdPtr Adopt(T* p) {
    NdPtr r;
    r.p_ = p;
    return r;
  }
  // Takes a new reference on p.
  static NdPtr Share(T* p) {
    if (p != nullptr) p->AddRef();
    return Adopt(p);
  }

  T* get() const { return p_; }
  T* operator->() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }

  // Out-parameter for Create*/Open* calls (void** as the ND signatures want); drops any current pointer.
  void** put() {
    reset();
    return reinterpret_cast<void**>(&p_);
  }

  T* detach() { return std::exchange(p_, nullptr); }

  void reset() {
    if (T* p = std::exchange(p_, nullptr)) p->Release();
  }

 private:
  T* p_ = nullptr;
};

}  // namespace netdirect

#endif  // NETDIRECT_ND_PTR_H_
