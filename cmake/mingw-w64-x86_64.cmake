# Cross toolchain for the win32-x64 build on a Linux host (scripts/build-win.js; the Wine test tier).
# mingw-w64's *-posix compilers: the default win32 thread model has no std::mutex/std::thread, which
# node-addon-api and the software provider need. CMakeLists.txt links the runtime statically (MINGW branch).
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)

set(NETDIRECT_MINGW_PREFIX x86_64-w64-mingw32)
set(CMAKE_C_COMPILER ${NETDIRECT_MINGW_PREFIX}-gcc-posix)
set(CMAKE_CXX_COMPILER ${NETDIRECT_MINGW_PREFIX}-g++-posix)
set(CMAKE_RC_COMPILER ${NETDIRECT_MINGW_PREFIX}-windres)
set(CMAKE_DLLTOOL ${NETDIRECT_MINGW_PREFIX}-dlltool)
set(CMAKE_AR ${NETDIRECT_MINGW_PREFIX}-ar CACHE FILEPATH "")
set(CMAKE_RANLIB ${NETDIRECT_MINGW_PREFIX}-ranlib CACHE FILEPATH "")

set(CMAKE_FIND_ROOT_PATH /usr/${NETDIRECT_MINGW_PREFIX})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
