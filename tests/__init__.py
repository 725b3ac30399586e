"""sprue's tests, laid out as the code is: frontend/<layer>/, lowering/, runtime/, tools/, e2e/ (whole
programs), fuzz/. Every folder is a package, so that pytest imports each test module by its full
name (tests.lowering.test_pipeline) and the shared helpers import as `tests.helpers.<module>`;
test modules never import each other."""
