"""The scheduler extender: kube-scheduler's filter, prioritize and bind, by ArkGPU's policy."""
