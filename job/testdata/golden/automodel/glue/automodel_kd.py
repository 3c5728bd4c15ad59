"""One rank of the AutoModel KD recipe (as examples/llm_kd/kd.py runs it)."""
from nemo_automodel.components.config._arg_parser import parse_args_and_load_config
from nemo_automodel.recipes.llm.kd import KnowledgeDistillationRecipeForNextTokenPrediction

cfg = parse_args_and_load_config("recipe.yaml")
recipe = KnowledgeDistillationRecipeForNextTokenPrediction(cfg)
recipe.setup()
recipe.run_train_validation_loop()
