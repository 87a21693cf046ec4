all_losses += loss * ntokens
all_rewards += rewards * ntokens
