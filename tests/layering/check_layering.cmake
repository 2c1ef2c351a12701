# Fails if a file includes a header from a layer above it (README.md, "Architecture"):
#   sim/units, sim/engine, sim/memory: nothing from models/, hardware/, sim/fsdp/, sim/app/
#   models/ and hardware/: nothing from each other, sim/engine, sim/memory, sim/fsdp, sim/app
#   sim/fsdp/: nothing from sim/app/
# Usage: cmake -DSOURCE_DIR=... -P check_layering.cmake
set(rules
  "sim/units|models/|hardware/|sim/engine/|sim/memory/|sim/fsdp/|sim/app/"
  "sim/engine|models/|hardware/|sim/memory/|sim/fsdp/|sim/app/"
  "sim/memory|models/|hardware/|sim/fsdp/|sim/app/"
  "models|hardware/|sim/engine/|sim/memory/|sim/fsdp/|sim/app/"
  "hardware|models/|sim/engine/|sim/memory/|sim/fsdp/|sim/app/"
  "sim/fsdp|sim/app/")
set(violations "")
foreach(rule IN LISTS rules)
  string(REPLACE "|" ";" parts "${rule}")
  list(POP_FRONT parts folder)
  file(GLOB_RECURSE files "${SOURCE_DIR}/${folder}/*.hpp" "${SOURCE_DIR}/${folder}/*.cpp")
  foreach(f IN LISTS files)
    file(STRINGS "${f}" includes REGEX "^#include \"")
    foreach(line IN LISTS includes)
      foreach(forbidden IN LISTS parts)
        if(line MATCHES "#include \"${forbidden}")
          file(RELATIVE_PATH rel "${SOURCE_DIR}" "${f}")
          string(APPEND violations "  ${rel}: ${line} (layer ${folder} may not use ${forbidden})\n")
        endif()
      endforeach()
    endforeach()
  endforeach()
endforeach()
if(violations)
  message(FATAL_ERROR "layering violations:\n${violations}")
endif()
message(STATUS "layering ok")
