if self.accelerator.is_main_process:
    state_dict = self.accelerator.get_state_dict(self.model)
