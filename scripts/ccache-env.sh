# Sourced by scripts/setup.sh and scripts/mutate.sh: compile through ccache when it is installed
# (setup.sh installs it for the `ci` preset), so that scripts/mutate.sh's simt build reuses the
# objects the ci build just made (the same flags and sources, in a sibling build folder: the
# paths ccache hashes are made relative to the repository, and the -g1 kernel TUs' working
# folder is not hashed), and a rebuild after a checkout reuses everything unchanged.
# A launcher already set (CMAKE_<LANG>_COMPILER_LAUNCHER) is kept; MACTUNE_NO_CCACHE=1 opts out.
# A build folder takes the launcher when it is first configured.
if [[ -z ${MACTUNE_NO_CCACHE:-} ]] && command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(pwd -P)}
  export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  export CMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER:-ccache}
  export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
  export CMAKE_CUDA_COMPILER_LAUNCHER=${CMAKE_CUDA_COMPILER_LAUNCHER:-ccache}
fi
