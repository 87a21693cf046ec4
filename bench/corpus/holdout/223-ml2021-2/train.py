train_loss += output.loss
