"""The internal document store's core logic: upload hardening, extraction, segmentation."""
