"""The serving forms: each method of the table for B prompts at once, held to its single form row by
row."""
