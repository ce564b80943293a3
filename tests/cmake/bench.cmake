# Generation benchmark tests: the collector's unit tests (system probes mocked, no binary needed)
# and a CPU smoke test that runs the real collector against `mere.run model benchmark` on a tiny
# model (bundled models/qwen35-dense-tiny when present, else a synthetic one). See docs/benchmark.md.
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  add_test(NAME bench_collector
           COMMAND ${Python3_EXECUTABLE} -m unittest discover -s ${PROJECT_SOURCE_DIR}/tests/bench -v)
  set_tests_properties(bench_collector PROPERTIES TIMEOUT 120)
  add_test(NAME bench_smoke
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/bench/smoke_collector.py
                   $<TARGET_FILE:mere.run> ${PROJECT_SOURCE_DIR})
  set_tests_properties(bench_smoke PROPERTIES TIMEOUT 600)
else()
  message(STATUS "mere.run: python3 not found; bench_collector and bench_smoke tests skipped")
endif()
