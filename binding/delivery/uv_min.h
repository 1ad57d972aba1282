// The part of libuv the addon uses: threads (the completion poller) and, in event-loop mode, poll, timer and idle
// handles on the JS thread's loop (napi_get_uv_event_loop). node-api-headers ship no uv.h, but Node exports
// libuv's symbols to addons on POSIX, and libuv 1.x keeps these signatures and enumerator values stable; handle
// memory is sized at run time (uv_handle_size), so no struct layout is assumed. With uv.h on the include path
// (a node-gyp build), that is used instead. The Windows import library (node.lib from node-api-headers' .def)
// has no libuv symbols: NETDIRECT_HAVE_UV stays undefined there (std::thread, and no event-loop mode).
#ifndef NETDIRECT_UV_MIN_H_
#define NETDIRECT_UV_MIN_H_

#include <cstddef>
#include <cstdint>

#if defined(__has_include)
#if __has_include(<uv.h>)
#include <uv.h>
#define NETDIRECT_HAVE_UV 1
#endif
#endif

#if !defined(NETDIRECT_HAVE_UV) && !defined(_WIN32)
#include <pthread.h>
extern "C" {
typedef pthread_t uv_thread_t;
int uv_thread_create(uv_thread_t* tid, void (*entry)(void* arg), void* arg);
int uv_thread_join(uv_thread_t* tid);

typedef struct uv_loop_s uv_loop_t;
typedef struct uv_handle_s uv_handle_t;
typedef struct uv_poll_s uv_poll_t;
typedef struct uv_timer_s uv_timer_t;
typedef struct uv_idle_s uv_idle_t;
typedef enum { UV_IDLE = 6, UV_POLL = 8, UV_TIMER = 13 } uv_handle_type;  // values of libuv 1.x's UV_HANDLE_TYPE_MAP
enum uv_poll_event { UV_READABLE = 1, UV_WRITABLE = 2, UV_DISCONNECT = 4 };
typedef void (*uv_poll_cb)(uv_poll_t* handle, int status, int events);
typedef void (*uv_timer_cb)(uv_timer_t* handle);
typedef void (*uv_idle_cb)(uv_idle_t* handle);
typedef void (*uv_close_cb)(uv_handle_t* handle);
size_t uv_handle_size(uv_handle_type type);
int uv_poll_init(uv_loop_t* loop, uv_poll_t* handle, int fd);
int uv_poll_start(uv_poll_t* handle, int events, uv_poll_cb cb);
int uv_poll_stop(uv_poll_t* handle);
int uv_timer_init(uv_loop_t* loop, uv_timer_t* handle);
int uv_timer_start(uv_timer_t* handle, uv_timer_cb cb, uint64_t timeout, uint64_t repeat);
int uv_timer_stop(uv_timer_t* handle);
int uv_idle_init(uv_loop_t* loop, uv_idle_t* handle);
int uv_idle_start(uv_idle_t* handle, uv_idle_cb cb);
int uv_idle_stop(uv_idle_t* handle);
void uv_close(uv_handle_t* handle, uv_close_cb close_cb);
void uv_ref(uv_handle_t* handle);
void uv_unref(uv_handle_t* handle);
void* uv_handle_get_data(const uv_handle_t* handle);
void uv_handle_set_data(uv_handle_t* handle, void* data);
}
#define NETDIRECT_HAVE_UV 1
#endif

#endif  // NETDIRECT_UV_MIN_H_
