"""Request validation: AWS's answers to malformed EC2 / ELB / ELBv2 calls, before moto sees them.

Role: moto accepts most malformed calls (and then keeps the damage: an ELB named ``None``, a rule
with protocol ``frob``) or crashes on them (500). AWS rejects them with a 4xx and changes
nothing. This package answers such calls the way AWS does, in two layers:

* **the service model** (:class:`lab.aws.validation.model.ModelValidator`): botocore's EC2,
  ELB and ELBv2 models say which actions exist, which members are required, their types
  (integer, boolean, timestamp, ...), enums, length and value ranges and patterns. The flat
  query parameters are read back into the model's structure (EC2 lists are ``Name.N``, ELB
  lists ``Name.member.N``; wire names from the model's ``locationName``/``queryName``) and
  every present member is checked. EC2 answers with
  its own codes (``MissingParameter``, ``InvalidParameterValue``, first problem only); ELB and
  ELBv2 with ``ValidationError`` and the message of AWS's validation framework (``N validation
  errors detected: Value 'x' at 'listeners.1.member.instancePort' failed to satisfy constraint:
  ...``), all problems at once.
* **semantic rules** (:mod:`lab.aws.validation.rules`, the existence checks in
  :mod:`lab.aws.validation.existence`) AWS applies to the calls a cloud controller makes:
  security-group permissions (protocol names and numbers, port ranges, ICMP type/code, a source
  for every permission: kubernetes#57568), CIDR syntax, security-group names and descriptions,
  load balancer names, listener ports, the existence of the VPC / subnets / groups a call
  names, ``Filter.N.Name`` against the filters the model documents for the action, and
  pagination tokens the endpoint never issued.

Every rule is a switch of :class:`lab.aws.fidelity_config.FidelityConfig` (``validate_*``; the
``validation`` switch turns all of them off). Errors carry ``source="validation:<rule>"`` for
the trail. Messages follow AWS's wording where a public source shows it; see
``lab/aws/README.md`` for the list and the cases where the wording is ours.

Modules: :mod:`.tree` (the flat parameters as a tree), :mod:`.model` (the service models),
:mod:`.rules` and :mod:`.existence` (the semantic rules), :mod:`.validator`
(:class:`~lab.aws.validation.validator.RequestValidator`, the one entry: model first, then the
rules in order, each behind its switch; and the refusal of a call no service owns).

Neighbours: the ``validate`` and ``route`` stages of the moto endpoint
(:mod:`lab.aws.motostages`) call it under the endpoint's lock (existence checks read moto's
backends through :class:`lab.aws.fidelity.MotoView`); errors are the classes of
:mod:`lab.aws.exceptions`, serialized by :mod:`lab.aws.pipeline`.
"""
