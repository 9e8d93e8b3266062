"""Code the tests share: toy models and exact laws (toy, feature_toys, checker), random GPT-2s and
heads (micro), batched rows against single runs (batchrows, token_trees), Medusa's trees (trees),
broken samplers and verifiers, the sequences a test grades an exercise at (fewest), the method
table's needs (methods), and running a command as a user
does (clitools)."""
