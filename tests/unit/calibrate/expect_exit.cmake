# Runs COMMAND (a ;-list) with ENV (a ;-list of NAME=VALUE) and fails unless it exits with EXIT
# and its output matches REGEX. Usage: cmake -DCOMMAND=... -DEXIT=2 -DREGEX=... -P expect_exit.cmake
execute_process(COMMAND ${CMAKE_COMMAND} -E env ${ENV} ${COMMAND}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc STREQUAL "${EXIT}")
  message(FATAL_ERROR "expected exit code ${EXIT}, got ${rc}\nstdout: ${out}\nstderr: ${err}")
endif()
if(NOT "${out}${err}" MATCHES "${REGEX}")
  message(FATAL_ERROR "output does not match '${REGEX}'\nstdout: ${out}\nstderr: ${err}")
endif()
message(STATUS "exit ${rc}: ${err}")
