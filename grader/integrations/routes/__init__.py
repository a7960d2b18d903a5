"""The ways a submission reaches the grader, each through ``core.run.GradingRun``: the command
line (``cli``; the class's commands in ``class_commands``), a class (``batch``, ``shards``,
``slurm``), Gradescope, nbgrader (``notebook``, ``kernel``, ``nbgrader_autograde``,
``nbgrader_gradebook``, ``hide``), pytest (``pytest_plugin``), and what students are handed
(``stubs``, ``handout``)."""
