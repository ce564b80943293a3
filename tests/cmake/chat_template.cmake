# Chat-template reference tests (node + @huggingface/jinja, see docs/chat-template.md):
#  - chat_template_reference: ~700 generated conversations rendered by @huggingface/jinja and by
#    `mere.run text render-chat --batch` on the real Qwen3 template and tests/data/chat/*.jinja;
#  - jinja_cases_reference: re-renders tests/data/chat/jinja_cases.json (the expectations the gtest
#    JinjaCases suite uses) with @huggingface/jinja and checks they are still what is recorded.
# Both need node and tests/npm/node_modules (scripts/test.sh runs npm ci first).
find_program(MERE_NODE node)
if(MERE_NODE)
  add_test(NAME chat_template_reference
           COMMAND ${MERE_NODE} ${PROJECT_SOURCE_DIR}/tests/npm/chat_template_reference.js
                   --binary $<TARGET_FILE:mere.run>)
  add_test(NAME jinja_cases_reference
           COMMAND ${MERE_NODE} ${PROJECT_SOURCE_DIR}/tests/npm/jinja_cases.js --check)
else()
  foreach(t chat_template_reference jinja_cases_reference)
    add_test(NAME ${t} COMMAND ${CMAKE_COMMAND} -E echo "${t}: FAIL: node not found (scripts/setup.sh installs nodejs)")
    set_tests_properties(${t} PROPERTIES PASS_REGULAR_EXPRESSION "^$")
  endforeach()
endif()
set_tests_properties(chat_template_reference jinja_cases_reference PROPERTIES TIMEOUT 300)
