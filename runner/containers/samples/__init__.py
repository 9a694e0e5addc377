"""The docker wing's samples: one sample, each in a fresh container
(`runner.containers.samples.executor.DockerSampleExecutor`), from its setting
(`setting`: inputs, tree, network, database, env) to its containers and what they came
to (`container`), driven inside by `driver`."""
