"""The admission webhook (``arkgpu webhook run``): GPU pods to ArkGPU's scheduler, bad ones refused.

Mutating (:mod:`.mutating`) and validating (:mod:`.validating`, :mod:`.resources`)
rules are pure functions of a pod's view (:mod:`.pods`); :mod:`.reviews` speaks
AdmissionReview v1, :mod:`.admitting` ties them to the HTTP routes, :mod:`.inventory`
watches the nodes' GPU memory and :mod:`.serving` runs it all (docs/k8s/WEBHOOK.md).
"""
