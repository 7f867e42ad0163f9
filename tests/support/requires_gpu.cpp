bool cugraphs_test_requires_gpu() { return true; }
