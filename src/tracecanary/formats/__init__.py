"""Every file format's identity and contract: format ids, the op/dtype/collective
vocabulary, the native trace format and the JSON Schemas (package data)."""
