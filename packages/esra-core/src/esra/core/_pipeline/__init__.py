"""The retrieval pipeline, one module per stage, in the order the spec gives them."""
