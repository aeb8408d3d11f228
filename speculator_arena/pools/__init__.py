"""Session pools: real conversations and agent trajectories, cut to structure fitted from traces.

The runner reads pools only through `speculator_arena.pools.api` (docs/contributors/contracts.md).
"""
