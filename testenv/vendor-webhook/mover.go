package main

// The test's mover, `--vendor native:CONTAINER`: not a vendor, a stand-in for what sexton's
// native strategy does to an injected sidecar (moves it from spec.containers to the end of
// spec.initContainers with restartPolicy Always), so that a test can show what a vendor
// re-invoked after such a move does, without sexton (webhook tests with sexton's own webhook
// are the lead's). Registered under a name the test chooses (--configuration-name), called
// once (reinvocationPolicy Never), failing loudly (failurePolicy Fail).

const moverPrefix = "native:"

func mover(container string) vendor {
	return vendor{
		inject: func(p *Pod, _ options) (string, error) {
			i := p.Index("containers", container)
			if i < 0 {
				return "no container " + container + " in spec.containers", nil
			}
			l := p.List("containers")
			c := l[i].(obj)
			p.SetList("containers", append(l[:i:i], l[i+1:]...))
			c["restartPolicy"] = "Always"
			p.Insert("initContainers", -1, c)
			return "", nil
		},
		hook: hook{
			Configuration:  "sexton-test-mover",
			Webhook:        "mover.test.sexton.dev",
			FailurePolicy:  "Fail",
			Reinvocation:   "Never",
			Operations:     []string{"CREATE"},
			TimeoutSeconds: 10,
		},
	}
}
