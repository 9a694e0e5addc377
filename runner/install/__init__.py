"""What the tool needs on this machine beyond its code: the files it ships (images' build
contexts, examples, the compose template, the engine check, the gateway package), and,
as later modules add them, Docker Compose and the engine checks of `doctor`."""
