# Tokenizer reference test: mere.run text tokenize vs Hugging Face tokenizers (npm binding) on the real
# Qwen3 tokenizer.json over a generated corpus (tests/npm/tokenizer_vs_hf.js). Needs node and
# tests/npm/node_modules (scripts/test.sh runs npm ci first); fails with a clear message otherwise.
find_program(MERE_NODE node)
if(MERE_NODE)
  add_test(NAME tokenizer_vs_hf
           COMMAND ${MERE_NODE} ${PROJECT_SOURCE_DIR}/tests/npm/tokenizer_vs_hf.js $<TARGET_FILE:mere.run>)
else()
  add_test(NAME tokenizer_vs_hf
           COMMAND sh -c "echo 'tokenizer_vs_hf: FAIL: node not found (scripts/setup.sh installs nodejs)'; exit 1")
endif()
set_tests_properties(tokenizer_vs_hf PROPERTIES TIMEOUT 600)
