# CLI contract tests (help, unknown flags, bad inputs, end-to-end on a synthetic model).
add_test(NAME cli_contract COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/cli_test.sh $<TARGET_FILE:mere.run>)
set_tests_properties(cli_contract PROPERTIES TIMEOUT 600)
