"""Backends above the executor: our prims graphs handed back to torch (`to_fx`), and a
`torch.compile` backend (`dynamo.aten2prims_backend`). Everything here imports torch when called."""
