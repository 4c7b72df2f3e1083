"""One module per build step, each ``run(ctx, state) -> output``; the driver's STEPS table orders them."""
