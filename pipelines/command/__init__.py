"""What every command shares: its flags, generated from its typed config (`flags`), and its
progress line on stderr (`progress`). Beam-free and standard library only, so the trainer
uses it as the Beam stages do."""
