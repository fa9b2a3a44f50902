"""The language model (Inan et al. 2017; Pappas & Henderson 2019): its task on the harness, NT-ASGD and the
CUDA-graph step."""
