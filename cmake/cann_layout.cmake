# Install-time script (install(CODE)): the CANN layout on top of the GNU one. CANN programs are
# built with -I$ASCEND_HOME_PATH/include -L$ASCEND_HOME_PATH/lib64 and run with
# LD_LIBRARY_PATH=$ASCEND_HOME_PATH/lib64, so lib64/ holds the libraries under the names CANN's
# Makefiles link (-lhccl -lascendcl, and -lacl_rt -lmsprofiler for newer hccl_test), all relative
# symbolic links into the real library directory: the tree stays correct wherever it is installed
# (cmake --install --prefix P) or moved after a DESTDIR staging.
#
# Expects HC_LIBDIR (CMAKE_INSTALL_LIBDIR) and HC_SONAMES (the files to link: libhccl.so.0 ...).
set(prefix "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
set(lib64 "${prefix}/lib64")
file(MAKE_DIRECTORY "${lib64}")
file(RELATIVE_PATH up "${lib64}" "${prefix}/${HC_LIBDIR}")
if(up STREQUAL "")
  set(up ".")
endif()

function(hc_link name target)
  set(path "${lib64}/${name}")
  if(IS_SYMLINK "${path}" OR EXISTS "${path}")
    file(REMOVE "${path}")
  endif()
  message(STATUS "Installing: ${path} -> ${target}")
  file(CREATE_LINK "${target}" "${path}" SYMBOLIC)
endfunction()

if(NOT up STREQUAL ".")
  foreach(file IN LISTS HC_SONAMES)
    hc_link("${file}" "${up}/${file}")
  endforeach()
  hc_link("libhccl.so" "${up}/libhccl.so")
  hc_link("libascendcl.so" "${up}/libascendcl.so")
endif()
# Names newer CANN releases split the runtime into; one library serves them all on a host.
hc_link("libacl_rt.so" "libascendcl.so")
hc_link("libmsprofiler.so" "libascendcl.so")
