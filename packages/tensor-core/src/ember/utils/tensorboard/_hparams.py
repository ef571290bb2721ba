"""The three summaries of TensorBoard's hparams plugin: experiment, session start, session end."""

import numbers

from google.protobuf import struct_pb2  # protobuf: a dependency of tensorboard
from tensorboard.compat.proto import summary_pb2
from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2
from tensorboard.plugins.hparams import metadata as hparams_metadata

from . import _arrays


def _kind(name, value):
    """(field of google.protobuf.Value, api_pb2 data type, value) for one hyperparameter."""
    if isinstance(value, str):
        return "string_value", "DATA_TYPE_STRING", value
    # bools are numbers 1.0/0.0, as PyTorch's writer stores them (its bool branch comes after the
    # number one, which takes them), so the two write the same files.
    if isinstance(value, numbers.Real):
        return "number_value", "DATA_TYPE_FLOAT64", float(value)
    if hasattr(value, "detach"):
        return "number_value", "DATA_TYPE_FLOAT64", float(_arrays.to_numpy(value).reshape(-1)[0])
    raise ValueError(
        f"hparam_dict[{name!r}] should be one of int, float, str, bool, or a tensor, got {type(value).__name__}"
    )


def _value(field, choice):
    return struct_pb2.Value(**{field: float(choice) if field == "number_value" else choice})


def _summary(tag, plugin_data):
    content = plugin_data.SerializeToString()
    metadata = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=hparams_metadata.PLUGIN_NAME, content=content)
    )
    return summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, metadata=metadata)])


def hparams_summaries(hparam_dict, metric_dict, hparam_domain_discrete=None):
    """``[experiment, session_start_info, session_end_info]`` summaries for ``add_hparams``.

    Raises:
        TypeError: ``hparam_domain_discrete`` is not a dict of lists of the hyperparameter's type.
        ValueError: a hyperparameter has an unsupported type.
    """
    domains = hparam_domain_discrete or {}
    if not isinstance(domains, dict):
        raise TypeError("hparam_domain_discrete should be a dict of lists")
    for name, choices in domains.items():
        if name not in hparam_dict or not isinstance(choices, list):
            raise TypeError(f"hparam_domain_discrete[{name!r}] should be a list, for a key of hparam_dict")
        if not all(isinstance(choice, type(hparam_dict[name])) for choice in choices):
            raise TypeError(f"hparam_domain_discrete[{name!r}] should be a list of same type as hparam_dict[{name!r}].")
    version = hparams_metadata.PLUGIN_DATA_VERSION
    start = plugin_data_pb2.SessionStartInfo()
    infos = []
    for name, value in hparam_dict.items():
        if value is None:
            continue
        field, data_type, value = _kind(name, value)
        setattr(start.hparams[name], field, value)
        info = api_pb2.HParamInfo(name=name, type=api_pb2.DataType.Value(data_type))
        if name in domains:
            info.domain_discrete.CopyFrom(
                struct_pb2.ListValue(values=[_value(field, choice) for choice in domains[name]])
            )
        infos.append(info)
    experiment = api_pb2.Experiment(
        hparam_infos=infos, metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag=tag)) for tag in metric_dict]
    )
    end = plugin_data_pb2.SessionEndInfo(status=api_pb2.Status.Value("STATUS_SUCCESS"))
    tags_and_data = (
        (hparams_metadata.EXPERIMENT_TAG, {"experiment": experiment}),
        (hparams_metadata.SESSION_START_INFO_TAG, {"session_start_info": start}),
        (hparams_metadata.SESSION_END_INFO_TAG, {"session_end_info": end}),
    )
    return [_summary(tag, plugin_data_pb2.HParamsPluginData(version=version, **data)) for tag, data in tags_and_data]
