# The full greedy-parity check of issue 7 on the CPU, in CI: both bundled models, the five
# workload-style prompts, 256 tokens (EOS ignored), MTP adaptive and forced at every depth 1..B-1
# against no MTP. (The discovered BundledParity tests run the short 32-token form; this is the
# acceptance form. tools/mtp_parity.sh runs the same in a release build.)
add_test(NAME bundled_parity_full COMMAND mere_tests --gtest_filter=*BundledParity*)
set_tests_properties(bundled_parity_full PROPERTIES TIMEOUT 1500
                     ENVIRONMENT "MERE_PARITY_TOKENS=256;MERE_PARITY_ALL_DEPTHS=1")
