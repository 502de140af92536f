"""The class pipeline: course roots, running the tools, collection, the batch and its runners, the self-check."""
