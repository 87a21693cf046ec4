true_conditionals = jnp.multiply(mask, true_conditionals)
marginals = jnp.sum(true_conditionals, axis=1)  # Shape (B,).
