# mactune_set_warnings(target): the project's warning set for host C++ (and nvcc's host pass).
function(mactune_set_warnings target)
  set(flags -Wall -Wextra -Wpedantic -Wshadow)
  if(MACTUNE_WARNINGS_AS_ERRORS)
    list(APPEND flags -Werror)
  endif()
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${flags}>)
endfunction()
