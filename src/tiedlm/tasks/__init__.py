"""The tasks, peers above the harness (:mod:`tiedlm.train`): the language model (``lm``), the POS tagger
(``tag``), the translator (``translate``) and the subspace experiment (``subspace``). Each is one package: its
settings class, declared with :func:`~tiedlm.registry.register_task` (the task's one declaration), and its
:class:`~tiedlm.train.Task`. Nothing else names them: the harness, the run folders and ``reproduce`` read the
registry (:func:`tiedlm.registry.tasks`), which finds them through the ``tiedlm.tasks`` entry points."""
